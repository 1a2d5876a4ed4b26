def f(n: int) -> int:
    for i in range(n):
        pass
    return i
# error: 4:12 undefined name
