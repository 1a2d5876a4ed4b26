# config: heap_size=64
def fill(n: int) -> int:
    xs = []
    for i in range(n):
        xs.append(i)
    return len(xs)

def repeat(n: int) -> int:
    return len([7] * n)

# call: fill(10) -> 10
# call: fill(100) -> trap out_of_memory
# call: repeat(20) -> 20
# call: repeat(100) -> trap out_of_memory
