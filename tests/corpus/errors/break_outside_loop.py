def f() -> int:
    break
    return 0
# error: 2:5 'break' outside a loop
