# Appends move a full list to a block twice the size; 1000 ints fit the default memory.
def grow(n: int) -> int:
    xs = []
    for i in range(n):
        xs.append(i)
    s = 0
    for x in xs:
        s += x
    return s + len(xs) * 0 + xs[-1] - xs[n - 1]

def two_growing(n: int) -> list[int]:
    a = []
    b = []
    for i in range(n):
        a.append(i)
        b.append(-i)
    return [len(a), a[n - 1], b[n - 1], a[0] + b[0]]

# call: grow(1000) -> 499500
# call: two_growing(300) -> [300, 299, -299, 0]
