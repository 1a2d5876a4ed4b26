def _under_score(_x: int, X2: int) -> int:
    True_ = _x
    if_ = X2
    return True_ * 10 + if_

def camelCase(a: int) -> int:
    return _under_score(a, a)

# call: _under_score(3, 4) -> 34
# call: camelCase(1) -> 11
