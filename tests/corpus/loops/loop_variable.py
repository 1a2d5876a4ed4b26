# A visible variable of the loop variable's name is assigned by the loop and keeps its last
# value afterwards; an empty loop leaves it alone.
def keeps_last(n: int) -> int:
    i = 99
    for i in range(n):
        pass
    return i

def list_var(xs: list[int]) -> int:
    x = -1
    for x in xs:
        pass
    return x

def param_as_loop_var(k: int) -> int:
    for k in range(3, 6):
        pass
    return k

def broken(n: int) -> int:
    i = 0
    for i in range(n):
        if i * i > 20:
            break
    return i

# call: keeps_last(5) -> 4
# call: keeps_last(0) -> 99
# call: list_var([4, 5, 6]) -> 6
# call: list_var([]) -> -1
# call: param_as_loop_var(100) -> 5
# call: broken(100) -> 5
# call: broken(3) -> 2
