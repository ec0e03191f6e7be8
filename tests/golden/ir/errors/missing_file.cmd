ir verify tests/golden/ir/errors/no_such_file.ir
