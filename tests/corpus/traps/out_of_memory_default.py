# Memory is never freed during a run: 4,096 ints and 256 lists by default.
def big_repeat(n: int) -> int:
    return len([0] * n)

def many_lists(n: int) -> int:
    total = 0
    for i in range(n):
        xs = [i]
        total += len(xs)
    return total

def garbage(n: int) -> int:
    s = 0
    for i in range(n):
        xs = [0] * 100
        s += len(xs)
    return s

# call: big_repeat(3000) -> 3000
# call: big_repeat(5000) -> trap out_of_memory
# call: many_lists(100) -> 100
# call: many_lists(300) -> trap out_of_memory
# call: garbage(30) -> 3000
# call: garbage(50) -> trap out_of_memory
