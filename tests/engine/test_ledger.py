from bench.engine.ledger import Ledger, ModelShape


def brute_forward(shape: ModelShape, positions) -> int:
    return sum(2 * shape.params + 4 * shape.layers * c * shape.attn_width for c in positions)


def test_forward_seq_matches_per_token_sum():
    s = ModelShape(params=1000, layers=3, attn_width=16)
    assert s.forward_seq(7) == brute_forward(s, range(1, 8))
    assert s.forward_seq(5, start=7) == brute_forward(s, range(8, 13))
    assert s.forward_seq(0) == 0


def test_ledger_generation_forward_training():
    s = ModelShape(params=500, layers=2, attn_width=8)
    led = Ledger()
    led.generation(s, [4, 6], [3, 0])
    gen = brute_forward(s, range(1, 8)) + brute_forward(s, range(1, 7))  # prefill + cached tokens
    assert led.flops == gen and led.gen_tokens == 3
    led.forward(s, [7, 6])
    assert led.flops == 2 * gen
    led.training(s, [7], completion_tokens=3)
    assert led.flops == 2 * gen + 3 * brute_forward(s, range(1, 8)) and led.train_tokens == 3
