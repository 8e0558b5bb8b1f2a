//! Token samplers: greedy, temperature, top-k, top-p, repetition penalty.
