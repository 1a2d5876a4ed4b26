def table(n: int) -> list[int]:
    out = []
    for i in range(1, n + 1):
        for j in range(1, n + 1):
            out.append(i * j)
    return out

def triangle(n: int) -> int:
    c = 0
    for i in range(n):
        for j in range(i):
            for k in range(j):
                c += 1
    return c

def list_pairs(xs: list[int]) -> int:
    c = 0
    for a in xs:
        for b in xs:
            if a < b:
                c += 1
    return c

# call: table(3) -> [1, 2, 3, 2, 4, 6, 3, 6, 9]
# call: triangle(6) -> 20
# call: list_pairs([3, 1, 2, 2]) -> 5
