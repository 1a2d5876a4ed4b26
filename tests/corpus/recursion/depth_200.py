# The default depth limit (200 calls below the entry) is enough for this; one call more
# traps.
def down(n: int) -> int:
    if n == 0:
        return 0
    return 1 + down(n - 1)

def sum_list(xs: list[int], i: int) -> int:
    if i == len(xs):
        return 0
    return xs[i] + sum_list(xs, i + 1)

def make(n: int) -> list[int]:
    out = []
    for i in range(n):
        out.append(i)
    return out

def deep_sum() -> int:
    return sum_list(make(198), 0)

# call: down(199) -> 199
# call: down(150) -> 150
# call: down(200) -> 200
# call: down(201) -> trap recursion
# call: deep_sum() -> 19503
