# A small value stack runs out before the call depth limit.
# config: stack_size=64
def wide(n: int, a: int, b: int, c: int, d: int, e: int, f: int, g: int) -> int:
    if n == 0:
        return a + b + c + d + e + f + g
    return wide(n - 1, a, b, c, d, e, f, g)

# call: wide(2, 1, 1, 1, 1, 1, 1, 1) -> 7
# call: wide(30, 1, 1, 1, 1, 1, 1, 1) -> trap recursion
