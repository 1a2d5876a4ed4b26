def down(n: int) -> int:
    if n == 0:
        return 0
    return 1 + down(n - 1)

def forever(n: int) -> int:
    return forever(n + 1)

# call: down(1000) -> trap recursion
# call: down(250) -> trap recursion
# call: forever(0) -> trap recursion
# call: down(10) -> 10
