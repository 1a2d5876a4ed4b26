# Windows line endings.
def f(x: int) -> int:
    if x > 0:
        return x
    return -x

# call: f(-3) -> 3
# call: f(4) -> 4
