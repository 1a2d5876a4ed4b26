def f(n: int) -> int:
    for i in range(n):
        pass
    else:
        return 1
    return 0
# error: 4:5 'else' after a loop is not supported
