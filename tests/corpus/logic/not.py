def not_int(a: int) -> bool:
    return not a

def not_list(xs: list[int]) -> bool:
    return not xs

def not_bool(b: bool) -> bool:
    return not b

def not_cmp(a: int, b: int) -> bool:
    return not a == b

def double(a: int) -> bool:
    return not not a

def not_and(a: int, b: int) -> bool:
    return not a and not b

# call: not_int(0) -> True
# call: not_int(-3) -> False
# call: not_list([]) -> True
# call: not_list([0]) -> False
# call: not_bool(True) -> False
# call: not_cmp(1, 2) -> True
# call: not_cmp(2, 2) -> False
# call: double(5) -> True
# call: double(0) -> False
# call: not_and(0, 0) -> True
# call: not_and(0, 1) -> False
