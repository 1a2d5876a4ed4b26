# config: fuel=500
def spin() -> int:
    while True:
        pass

def count(n: int) -> int:
    i = 0
    while i < n:
        i += 1
    return i

def long_loop(n: int) -> int:
    for i in range(1000):
        n += i
    return n

# call: spin() -> trap out_of_fuel
# call: count(10) -> 10
# call: count(1000) -> trap out_of_fuel
# call: long_loop(0) -> trap out_of_fuel
