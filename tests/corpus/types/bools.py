def both(a: bool, b: bool) -> bool:
    return a and b

def from_compare(x: int) -> bool:
    r = x > 0
    r = r and x < 10
    return r

def bool_list(xs: list[int]) -> bool:
    return not not xs

def bool_var(n: int) -> bool:
    found = False
    for i in range(n):
        if i == 3:
            found = True
    return found

# call: both(True, False) -> False
# call: both(True, True) -> True
# call: from_compare(5) -> True
# call: from_compare(50) -> False
# call: from_compare(-5) -> False
# call: bool_list([0]) -> True
# call: bool_var(4) -> True
# call: bool_var(3) -> False
