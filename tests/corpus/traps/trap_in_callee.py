# A trap anywhere ends the whole run.
def inner(xs: list[int], i: int) -> int:
    return xs[i] // (i - 2)

def outer(n: int) -> int:
    xs = [10, 20, 30, 40]
    s = 0
    for i in range(n):
        s += inner(xs, i)
    return s

# call: outer(2) -> -25
# call: outer(3) -> trap zero_division
# call: outer(5) -> trap zero_division
