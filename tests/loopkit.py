"""One small HLO program shared by the trace, stepper and browser tests: a while loop whose
body reduces, compares and takes one of two branches, 3 iterations (x = [1, 2, 3]: sums 6,
12, 6 -> double, halve, double)."""

LOOP = """
HloModule loop

cond {
  s = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  three = s32[] constant(3)
  ROOT lt = pred[] compare(i, three), direction=LT
}

double {
  d = f32[3] parameter(0)
  ROOT twice = f32[3] add(d, d)
}

halve {
  h = f32[3] parameter(0)
  half = f32[] constant(0.5)
  halfs = f32[3] broadcast(half), dimensions={}
  ROOT m = f32[3] multiply(h, halfs)
}

sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT ab = f32[] add(a, b)
}

body {
  s2 = (s32[], f32[3]) parameter(0)
  i2 = s32[] get-tuple-element(s2), index=0
  x2 = f32[3] get-tuple-element(s2), index=1
  one = s32[] constant(1)
  next = s32[] add(i2, one)
  zero = f32[] constant(0)
  total = f32[] reduce(x2, zero), dimensions={0}, to_apply=sum
  big = f32[] constant(10)
  p = pred[] compare(total, big), direction=LT
  y = f32[3] conditional(p, x2, x2), true_computation=double, false_computation=halve
  ROOT out = (s32[], f32[3]) tuple(next, y)
}

ENTRY main {
  x = f32[3] parameter(0)
  start = s32[] constant(0)
  init = (s32[], f32[3]) tuple(start, x)
  w = (s32[], f32[3]) while(init), condition=cond, body=body
  ROOT r = f32[3] get-tuple-element(w), index=1
}
"""
