# 'for x in xs' iterates by index over the live list, as CPython does.
def append_while_iterating(xs: list[int]) -> list[int]:
    for x in xs:
        if x < 3:
            xs.append(x + 10)
    return xs

def pop_while_iterating(xs: list[int]) -> int:
    seen = 0
    for x in xs:
        xs.pop()
        seen += 1
    return seen * 100 + len(xs)

def overwrite_ahead(xs: list[int]) -> list[int]:
    out = []
    for x in xs:
        if len(out) == 0:
            xs[1] = 99
        out.append(x)
    return out

def rebind_name(xs: list[int]) -> list[int]:
    out = []
    for x in xs:
        out.append(x)
        xs = [7]
    return out

def grow_bounded(n: int) -> int:
    xs = [1]
    for x in xs:
        if x < n:
            xs.append(x + 1)
    return len(xs)

# call: append_while_iterating([1, 5, 2]) -> [1, 5, 2, 11, 12]
# call: pop_while_iterating([1, 2, 3, 4]) -> 202
# call: pop_while_iterating([1, 2, 3, 4, 5]) -> 302
# call: overwrite_ahead([1, 2, 3]) -> [1, 99, 3]
# call: rebind_name([1, 2, 3]) -> [1, 2, 3]
# call: grow_bounded(50) -> 50
