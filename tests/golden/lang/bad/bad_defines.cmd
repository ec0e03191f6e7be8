check tests/golden/lang/bad/data/tiny.dstrat -D hidden=16 -D =3 -D nothing=1 -D batch=
