def is_prime(n: int) -> bool:
    if n < 2:
        return False
    d = 2
    while d * d <= n:
        if n % d == 0:
            return False
        d += 1
    return True

def primes_below(n: int) -> list[int]:
    out = []
    for k in range(n):
        if is_prime(k):
            out.append(k)
    return out

def sieve_count(n: int) -> int:
    marks = [1] * n
    count = 0
    for i in range(2, n):
        if marks[i]:
            count += 1
            j = i * i
            while j < n:
                marks[j] = 0
                j += i
    return count

# call: is_prime(1) -> False
# call: is_prime(2) -> True
# call: is_prime(97) -> True
# call: is_prime(91) -> False
# call: is_prime(-7) -> False
# call: primes_below(30) -> [2, 3, 5, 7, 11, 13, 17, 19, 23, 29]
# call: sieve_count(1000) -> 168
