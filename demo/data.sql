-- Deterministic demo data for demo/schema.sql: no random(), every value is a function of
-- generate_series indices, so every load gives the same rows (and the same answers to questions).
-- Sizes: 20 countries, 1000 users, 1200 addresses, 12 categories, 200 products, 3000 orders,
-- ~7500 order items, ~2800 payments, ~2700 shipments, ~1000 reviews.

INSERT INTO countries (country_code, name, continent, currency) VALUES
    ('FR', 'France', 'Europe', 'EUR'),
    ('DE', 'Germany', 'Europe', 'EUR'),
    ('NL', 'Netherlands', 'Europe', 'EUR'),
    ('BE', 'Belgium', 'Europe', 'EUR'),
    ('ES', 'Spain', 'Europe', 'EUR'),
    ('IT', 'Italy', 'Europe', 'EUR'),
    ('GB', 'United Kingdom', 'Europe', 'GBP'),
    ('SE', 'Sweden', 'Europe', 'SEK'),
    ('PL', 'Poland', 'Europe', 'PLN'),
    ('CH', 'Switzerland', 'Europe', 'CHF'),
    ('US', 'United States', 'North America', 'USD'),
    ('CA', 'Canada', 'North America', 'CAD'),
    ('MX', 'Mexico', 'North America', 'MXN'),
    ('BR', 'Brazil', 'South America', 'BRL'),
    ('AR', 'Argentina', 'South America', 'ARS'),
    ('JP', 'Japan', 'Asia', 'JPY'),
    ('IN', 'India', 'Asia', 'INR'),
    ('SG', 'Singapore', 'Asia', 'SGD'),
    ('AU', 'Australia', 'Oceania', 'AUD'),
    ('ZA', 'South Africa', 'Africa', 'ZAR');

-- Users: Europe-heavy (weighted country list), 1 in 17 inactive, 1 in 9 without birth year.
INSERT INTO users (email, full_name, country_code, signed_up_at, is_active, birth_year)
SELECT lower(f.first || '.' || f.last || i || '@example.com'),
       f.first || ' ' || f.last,
       (ARRAY['FR','FR','FR','FR','FR','FR','DE','DE','DE','DE','DE','DE','GB','GB','GB','GB',
              'US','US','US','US','NL','NL','NL','ES','ES','ES','IT','IT','IT','BE','SE','PL',
              'CH','CA','MX','BR','AR','JP','IN','SG','AU','ZA'])[1 + (i * 7919) % 42],
       timestamptz '2022-01-01 00:00:00+00' + ((i * 1051) % 1000) * interval '1 day'
           + ((i * 613) % 1440) * interval '1 minute',
       i % 17 <> 0,
       CASE WHEN i % 9 = 0 THEN NULL ELSE 1950 + (i * 37) % 56 END
FROM generate_series(1, 1000) AS i,
     LATERAL (SELECT (ARRAY['Emma','Liam','Olivia','Noah','Ava','Lucas','Mia','Hugo','Sofia','Leo',
                            'Chloe','Arthur','Lena','Jules','Nina','Adam','Zoe','Louis','Alice','Ethan'])[1 + (i * 7) % 20] AS first,
                     (ARRAY['Martin','Bernard','Dubois','Muller','Schmidt','Rossi','Garcia','Smith','Jones','Novak',
                            'Jansen','Peeters','Silva','Kowalski','Andersson','Tanaka','Patel','Brown','Lopez','Moreau'])[1 + (i * 13) % 20] AS last) AS f
ORDER BY i;

-- One shipping address per user (address_id = user_id), plus a billing address for every 5th user.
INSERT INTO addresses (user_id, kind, street, city, postal_code, country_code)
SELECT u.user_id,
       k.kind,
       (1 + (u.user_id * 31) % 200) || ' ' ||
           (ARRAY['Main Street','Station Road','Church Lane','Park Avenue','Mill Road',
                  'High Street','Oak Drive','River Way'])[1 + (u.user_id + k.n) % 8],
       c.city,
       lpad(((u.user_id * 7919 + k.n) % 99999)::text, 5, '0'),
       u.country_code
FROM (VALUES (1, 'shipping'), (2, 'billing')) AS k(n, kind)
JOIN users u ON k.n = 1 OR u.user_id % 5 = 0
JOIN (VALUES ('FR','Paris'),('DE','Berlin'),('NL','Amsterdam'),('BE','Brussels'),('ES','Madrid'),
             ('IT','Milan'),('GB','London'),('SE','Stockholm'),('PL','Warsaw'),('CH','Zurich'),
             ('US','Chicago'),('CA','Toronto'),('MX','Guadalajara'),('BR','Sao Paulo'),('AR','Cordoba'),
             ('JP','Osaka'),('IN','Bangalore'),('SG','Singapore'),('AU','Melbourne'),('ZA','Cape Town'))
     AS c(code, city) ON c.code = u.country_code
ORDER BY k.n, u.user_id;

INSERT INTO categories (category_id, name, parent_id) VALUES
    (1, 'Electronics', NULL),
    (2, 'Home & Kitchen', NULL),
    (3, 'Books', NULL),
    (4, 'Sports & Outdoors', NULL),
    (5, 'Audio', 1),
    (6, 'Computers', 1),
    (7, 'Cookware', 2),
    (8, 'Furniture', 2),
    (9, 'Fiction', 3),
    (10, 'Cooking Books', 3),
    (11, 'Cycling', 4),
    (12, 'Camping', 4);

-- Products only in the leaf categories 5..12; price 5-500 EUR; 1 in 13 out of stock and unavailable.
INSERT INTO products (sku, name, category_id, price, stock, is_available, created_at)
SELECT 'SKU-' || lpad(i::text, 5, '0'),
       (ARRAY['Classic','Pro','Compact','Deluxe','Eco','Ultra','Smart','Travel','Family','Mini'])[1 + (i * 7) % 10]
           || ' ' ||
       (ARRAY['Headphones','Laptop','Frying Pan','Bookshelf','Novel','Cookbook','Bike Light','Tent'])[1 + cat - 5]
           || ' ' || (1 + i / 8),
       cat,
       round(5 + ((i * 7919) % 49500) / 100.0, 2),
       CASE WHEN i % 13 = 0 THEN 0 ELSE (i * 37) % 150 + 1 END,
       i % 13 <> 0,
       timestamptz '2021-06-01 00:00:00+00' + (i * 3) * interval '1 day'
FROM generate_series(1, 200) AS i, LATERAL (SELECT 5 + (i * 3) % 8 AS cat) AS c
ORDER BY i;

-- Orders spread over 2023-2024; most delivered, some cancelled/refunded, the latest still open.
INSERT INTO orders (user_id, shipping_address_id, status, ordered_at)
SELECT u, a.address_id,
       CASE WHEN i % 29 = 0 THEN 'cancelled'
            WHEN i % 41 = 0 THEN 'refunded'
            WHEN i > 2980 THEN 'pending'
            WHEN i > 2960 THEN 'paid'
            WHEN i > 2930 THEN 'shipped'
            ELSE 'delivered' END,
       timestamptz '2023-01-01 08:00:00+00' + (i * 730 / 3000) * interval '1 day'
           + ((i * 37) % 720) * interval '1 minute'
FROM generate_series(1, 3000) AS i,
     LATERAL (SELECT 1 + (i * 7919) % 1000 AS u) AS x
JOIN addresses a ON a.user_id = x.u AND a.kind = 'shipping'
ORDER BY i;

-- 1 to 4 distinct products per order; every 10th order got a 10% discount.
INSERT INTO order_items (order_id, line_no, product_id, quantity, unit_price)
SELECT o.order_id, l, p.product_id, 1 + (o.order_id + l) % 3,
       round(p.price * CASE WHEN o.order_id % 10 = 0 THEN 0.9 ELSE 1 END, 2)
FROM orders o
CROSS JOIN LATERAL generate_series(1, 1 + (o.order_id * 7) % 4) AS l
JOIN products p ON p.product_id = 1 + (o.order_id * 31 + l * 17) % 200
ORDER BY o.order_id, l;

-- A payment for every order that was paid (including refunded ones), equal to its total.
INSERT INTO payments (order_id, method, amount, paid_at)
SELECT o.order_id,
       (ARRAY['card','card','card','paypal','paypal','bank_transfer','gift_card'])[1 + o.order_id % 7],
       t.total,
       o.ordered_at + (5 + o.order_id % 120) * interval '1 minute'
FROM orders o
JOIN (SELECT order_id, sum(quantity * unit_price) AS total FROM order_items GROUP BY order_id) t
    USING (order_id)
WHERE o.status IN ('paid', 'shipped', 'delivered', 'refunded')
ORDER BY o.order_id;

-- A shipment for shipped, delivered and refunded orders; delivered_at NULL while in transit.
INSERT INTO shipments (order_id, carrier, tracking_no, shipped_at, delivered_at)
SELECT o.order_id,
       (ARRAY['DHL','UPS','FedEx','La Poste','PostNL'])[1 + o.order_id % 5],
       'TRK' || lpad(o.order_id::text, 8, '0'),
       o.ordered_at + (1 + o.order_id % 3) * interval '1 day',
       CASE WHEN o.status = 'shipped' THEN NULL
            ELSE o.ordered_at + (3 + o.order_id % 3 + o.order_id % 5) * interval '1 day' END
FROM orders o
WHERE o.status IN ('shipped', 'delivered', 'refunded')
ORDER BY o.order_id;

-- Reviews of about one delivered line in seven, at most one per (product, user), mostly positive.
INSERT INTO reviews (product_id, user_id, rating, title, created_at)
SELECT DISTINCT ON (oi.product_id, o.user_id)
       oi.product_id, o.user_id, r.rating,
       (ARRAY['Terrible, sent it back','Disappointing','It does the job','Very good','Excellent, recommended'])[r.rating],
       s.delivered_at + (1 + (oi.order_id + oi.line_no) % 20) * interval '1 day'
FROM order_items oi
JOIN orders o USING (order_id)
JOIN shipments s USING (order_id)
CROSS JOIN LATERAL (SELECT (ARRAY[5,4,5,3,4,5,2,4,5,1])[1 + (oi.order_id * 3 + oi.line_no) % 10]::smallint AS rating) AS r
WHERE o.status = 'delivered' AND (oi.order_id * 3 + oi.line_no * 5) % 7 = 0
ORDER BY oi.product_id, o.user_id, oi.order_id;

ANALYZE;
