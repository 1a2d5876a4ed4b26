def annotated() -> int:
    x: int = 5
    xs: list[int] = []
    flag: bool = False
    xs.append(x)
    if not flag:
        x = 7
    return x + len(xs)

def annotated_bool(a: int) -> bool:
    ok: bool = a > 3
    return ok

# call: annotated() -> 8
# call: annotated_bool(4) -> True
# call: annotated_bool(3) -> False
