def f0() -> int:
    return 0

def f1() -> int:
    return 1

def f2() -> int:
    return 2

def f3() -> int:
    return 3

def f4() -> int:
    return 4

def f5() -> int:
    return 5

def f6() -> int:
    return 6

def f7() -> int:
    return 7

def f8() -> int:
    return 8

def f9() -> int:
    return 9

def f10() -> int:
    return 10

def f11() -> int:
    return 11

def f12() -> int:
    return 12

def f13() -> int:
    return 13

def f14() -> int:
    return 14

def f15() -> int:
    return 15

def f16() -> int:
    return 16

def f17() -> int:
    return 17

def f18() -> int:
    return 18

def f19() -> int:
    return 19

def f20() -> int:
    return 20

def f21() -> int:
    return 21

def f22() -> int:
    return 22

def f23() -> int:
    return 23

def f24() -> int:
    return 24

def f25() -> int:
    return 25

def f26() -> int:
    return 26

def f27() -> int:
    return 27

def f28() -> int:
    return 28

def f29() -> int:
    return 29

def f30() -> int:
    return 30

def f31() -> int:
    return 31

def f32() -> int:
    return 32

def f33() -> int:
    return 33

def f34() -> int:
    return 34

def f35() -> int:
    return 35

def f36() -> int:
    return 36

def f37() -> int:
    return 37

def f38() -> int:
    return 38

def f39() -> int:
    return 39

def f40() -> int:
    return 40

def f41() -> int:
    return 41

def f42() -> int:
    return 42

def f43() -> int:
    return 43

def f44() -> int:
    return 44

def f45() -> int:
    return 45

def f46() -> int:
    return 46

def f47() -> int:
    return 47

def f48() -> int:
    return 48

def f49() -> int:
    return 49

def f50() -> int:
    return 50

def f51() -> int:
    return 51

def f52() -> int:
    return 52

def f53() -> int:
    return 53

def f54() -> int:
    return 54

def f55() -> int:
    return 55

def f56() -> int:
    return 56

def f57() -> int:
    return 57

def f58() -> int:
    return 58

def f59() -> int:
    return 59

def f60() -> int:
    return 60

def f61() -> int:
    return 61

def f62() -> int:
    return 62

def f63() -> int:
    return 63

def f64() -> int:
    return 64

# error: 193:1 too many functions
