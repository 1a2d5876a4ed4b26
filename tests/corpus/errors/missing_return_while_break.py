def f(x: int) -> int:
    while True:
        if x > 3:
            break
        x += 1
# error: 1:5 function may end without returning a value
