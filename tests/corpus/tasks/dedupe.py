def dedupe(xs: list[int]) -> list[int]:
    out = []
    for x in xs:
        seen = False
        for y in out:
            if y == x:
                seen = True
                break
        if not seen:
            out.append(x)
    return out

def dedupe_sorted_in_place(xs: list[int]) -> int:
    if len(xs) == 0:
        return 0
    k = 1
    for i in range(1, len(xs)):
        if xs[i] != xs[k - 1]:
            xs[k] = xs[i]
            k += 1
    while len(xs) > k:
        xs.pop()
    return k

def check() -> list[int]:
    xs = [1, 1, 2, 3, 3, 3, 4]
    k = dedupe_sorted_in_place(xs)
    xs.append(k)
    return xs

# call: dedupe([3, 1, 3, 2, 1]) -> [3, 1, 2]
# call: dedupe([]) -> []
# call: check() -> [1, 2, 3, 4, 4]
