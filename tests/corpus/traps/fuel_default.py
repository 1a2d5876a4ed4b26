# The default budget of 100,000 steps is enough for a few thousand loop iterations.
def count(n: int) -> int:
    s = 0
    for i in range(n):
        s += i
    return s

def spin() -> int:
    x = 0
    while x >= 0:
        x = (x + 1) % 10
    return x

# call: count(3000) -> 4498500
# call: count(1000000) -> trap out_of_fuel
# call: spin() -> trap out_of_fuel
