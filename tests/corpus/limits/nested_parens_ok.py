# 30 nested parentheses (each is a bracket and an expression level).
def f(x: int) -> int:
    return ((((((((((((((((((((((((((((((x))))))))))))))))))))))))))))))

# call: f(3) -> 3
