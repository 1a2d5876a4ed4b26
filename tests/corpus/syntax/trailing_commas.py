def f(a: int, b: int,) -> int:
    return a - b

def g() -> int:
    total = 0
    for i in range(5,):
        total += i
    for i in range(1, 5, 2,):
        total += i
    return f(total, 1,) + len([1, 2,])

# call: f(5, 2) -> 3
# call: g() -> 15
