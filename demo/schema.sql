-- TurboInfer demo database: a small online shop, the kind of schema nl2sql() is meant to answer
-- questions about ("how many users?", "top 5 products by revenue in 2024", ...).
-- Loaded by `make demo-db` into database turboinfer_demo, followed by demo/data.sql.

CREATE TABLE countries (
    country_code char(2) PRIMARY KEY CHECK (country_code ~ '^[A-Z]{2}$'),
    name         text NOT NULL UNIQUE,
    continent    text NOT NULL CHECK (continent IN ('Africa', 'Asia', 'Europe', 'North America',
                                                    'Oceania', 'South America')),
    currency     char(3) NOT NULL CHECK (currency ~ '^[A-Z]{3}$')
);
COMMENT ON TABLE countries IS 'Countries the shop ships to (ISO 3166-1 alpha-2 codes).';

CREATE TABLE users (
    user_id      integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email        text NOT NULL UNIQUE CHECK (email LIKE '%_@_%'),
    full_name    text NOT NULL,
    country_code char(2) NOT NULL REFERENCES countries,
    signed_up_at timestamptz NOT NULL,
    is_active    boolean NOT NULL DEFAULT true,
    birth_year   integer CHECK (birth_year BETWEEN 1900 AND 2015)
);
COMMENT ON TABLE users IS 'Registered customers of the shop.';
COMMENT ON COLUMN users.is_active IS 'false once the customer closed the account.';
COMMENT ON COLUMN users.birth_year IS 'Optional; NULL when the customer did not say.';

CREATE TABLE addresses (
    address_id   integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id      integer NOT NULL REFERENCES users ON DELETE CASCADE,
    kind         text NOT NULL CHECK (kind IN ('shipping', 'billing')),
    street       text NOT NULL,
    city         text NOT NULL,
    postal_code  text NOT NULL,
    country_code char(2) NOT NULL REFERENCES countries
);
COMMENT ON TABLE addresses IS 'Shipping and billing addresses of users; a user may have several.';

CREATE TABLE categories (
    category_id  integer PRIMARY KEY,
    name         text NOT NULL UNIQUE,
    parent_id    integer REFERENCES categories,
    CHECK (parent_id IS DISTINCT FROM category_id)
);
COMMENT ON TABLE categories IS 'Product categories, two levels deep (parent_id NULL for top-level).';

CREATE TABLE products (
    product_id   integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sku          text NOT NULL UNIQUE,
    name         text NOT NULL,
    category_id  integer NOT NULL REFERENCES categories,
    price        numeric(10, 2) NOT NULL CHECK (price > 0),
    stock        integer NOT NULL CHECK (stock >= 0),
    is_available boolean NOT NULL DEFAULT true,
    created_at   timestamptz NOT NULL
);
COMMENT ON TABLE products IS 'Products for sale.';
COMMENT ON COLUMN products.price IS 'Current list price in EUR, VAT included.';
COMMENT ON COLUMN products.stock IS 'Units in the warehouse right now.';

CREATE TABLE orders (
    order_id     integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    user_id      integer NOT NULL REFERENCES users,
    shipping_address_id integer NOT NULL REFERENCES addresses,
    status       text NOT NULL CHECK (status IN ('pending', 'paid', 'shipped', 'delivered',
                                                 'cancelled', 'refunded')),
    ordered_at   timestamptz NOT NULL
);
COMMENT ON TABLE orders IS 'Customer orders; the amount is the sum of its order_items.';
COMMENT ON COLUMN orders.status IS 'pending -> paid -> shipped -> delivered, or cancelled/refunded.';

CREATE TABLE order_items (
    order_id     integer NOT NULL REFERENCES orders ON DELETE CASCADE,
    line_no      integer NOT NULL CHECK (line_no > 0),
    product_id   integer NOT NULL REFERENCES products,
    quantity     integer NOT NULL CHECK (quantity > 0),
    unit_price   numeric(10, 2) NOT NULL CHECK (unit_price > 0),
    PRIMARY KEY (order_id, line_no)
);
COMMENT ON TABLE order_items IS 'Lines of an order: product, quantity and the price paid per unit.';
COMMENT ON COLUMN order_items.unit_price IS 'Price per unit at the time of the order (EUR).';

CREATE TABLE payments (
    payment_id   integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id     integer NOT NULL UNIQUE REFERENCES orders,
    method       text NOT NULL CHECK (method IN ('card', 'paypal', 'bank_transfer', 'gift_card')),
    amount       numeric(12, 2) NOT NULL CHECK (amount >= 0),
    paid_at      timestamptz NOT NULL
);
COMMENT ON TABLE payments IS 'One payment per paid order.';

CREATE TABLE shipments (
    shipment_id  integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id     integer NOT NULL UNIQUE REFERENCES orders,
    carrier      text NOT NULL CHECK (carrier IN ('DHL', 'UPS', 'FedEx', 'La Poste', 'PostNL')),
    tracking_no  text NOT NULL UNIQUE,
    shipped_at   timestamptz NOT NULL,
    delivered_at timestamptz,
    CHECK (delivered_at IS NULL OR delivered_at >= shipped_at)
);
COMMENT ON TABLE shipments IS 'Shipments of orders; delivered_at is NULL while in transit.';

CREATE TABLE reviews (
    review_id    integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    product_id   integer NOT NULL REFERENCES products,
    user_id      integer NOT NULL REFERENCES users,
    rating       smallint NOT NULL CHECK (rating BETWEEN 1 AND 5),
    title        text NOT NULL,
    created_at   timestamptz NOT NULL,
    UNIQUE (product_id, user_id)
);
COMMENT ON TABLE reviews IS 'Product reviews, 1 to 5 stars; at most one per user and product.';

CREATE INDEX ON users (country_code);
CREATE INDEX ON addresses (user_id);
CREATE INDEX ON products (category_id);
CREATE INDEX ON orders (user_id);
CREATE INDEX ON orders (ordered_at);
CREATE INDEX ON order_items (product_id);
CREATE INDEX ON reviews (user_id);
