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


# An attention_v2 counterexample small enough to print its inputs inline
# (properties/attention.cpp, describe_inline): q, k, v packed [rows][heads][dim].
ATTENTION = ("seed=3 case=2 (shrunk 5 steps) dist=gaussian batch=1 heads=2/1 sq=1 sk=2 d=2 dv=1 "
             "seed=9 q=[0.5, -1, 2, 3] k=[1, inf, 0.25, -2] v=[1, 2] sinks=[0.5, 1] "
             "scale=0.707106769 (q, k, v packed [rows][heads][dim]) ; at sequence 0 query 0 "
             "head 0 lse: got -inf, exact 1.25")


def test_attention_inputs_become_tensor_literals():
    lit = tensor_literal(ATTENTION, "float32")
    assert lit.splitlines() == [
        'q = torch.tensor([[[0.5, -1], [2, 3]]], dtype=torch.float32)',
        'k = torch.tensor([[[1, float("inf")]], [[0.25, -2]]], dtype=torch.float32)',
        'v = torch.tensor([[[1]], [[2]]], dtype=torch.float32)',
        'sinks = torch.tensor([0.5, 1], dtype=torch.float32)'], lit


def test_fp8_attention_inputs_are_converted():
    lit = tensor_literal(ATTENTION, "fp8_e4m3")
    assert lit.splitlines()[0] == (
        'q = torch.tensor([[[0.5, -1], [2, 3]]], dtype=torch.float32).to(torch.float8_e4m3fn)')


def test_attention_without_inline_inputs_gives_no_literal():
    assert tensor_literal("dist=gaussian batch=1 heads=2/1 sq=40 sk=40 d=64 dv=64 seed=9",
                          "float32") is None
    # values that do not fill whole rows of heads x dim: no literal rather than a wrong one
    assert tensor_literal(ATTENTION.replace("q=[0.5, -1, 2, 3]", "q=[0.5, -1, 2]"),
                          "float32") is None


def test_attention_backward_dout_is_shaped_like_out():
    text = ATTENTION.replace(" sinks=[0.5, 1]", " dout=[0.25, -0.5]")
    assert tensor_literal(text, "float32").splitlines()[-1] == (
        'dout = torch.tensor([[[0.25], [-0.5]]], dtype=torch.float32)')
