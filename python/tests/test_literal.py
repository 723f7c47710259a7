from softmax_audit import tensor_literal


def test_rows_become_a_tensor_literal():
    text = "dist=special n=3 rows=2 values=[1.5, -inf, 2 | nan, 0, 100]"
    assert tensor_literal(text, "bfloat16") == (
        'torch.tensor([[1.5, float("-inf"), 2], [float("nan"), 0, 100]], '
        'dtype=torch.bfloat16)')


def test_abridged_rows_give_no_literal():
    assert tensor_literal("values=[1, 2, ... (206 more; finite range [-40, 39.25])]",
                          "float32") is None
    assert tensor_literal("no values here", "float32") is None
