def f(x: int) -> int:
    if x:
        continue
    return 0
# error: 3:9 'continue' outside a loop
