# config: max_depth=50
def down(n: int) -> int:
    if n == 0:
        return 0
    return 1 + down(n - 1)

# call: down(40) -> 40
# call: down(50) -> 50
# call: down(51) -> trap recursion
# call: down(60) -> trap recursion
