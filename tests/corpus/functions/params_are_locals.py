# Assigning a parameter changes only the callee's variable.
def bump(x: int) -> int:
    x += 1
    return x

def caller() -> int:
    x = 10
    y = bump(x)
    return x * 100 + y

# call: caller() -> 1011
# call: bump(-1) -> 0
