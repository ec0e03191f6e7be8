" Vim syntax for dstc .dstrat files. The keyword lists match the grammar's
" literal tokens (tests/unit/frontend checks them against Dstrat.g4).
if exists("b:current_syntax")
  finish
endif

syn keyword dstratDecl import layer module model strategy search
syn keyword dstratKeyword input param buffer let output if else repeat for on mesh train inference schedule pipeline over default compute memory tie use vary in where try
syn keyword dstratOperator and or not
syn keyword dstratConstant true false
syn match dstratConstant "\<1f1b\>"
syn keyword dstratType int float bool string symbol fp32 fp16 bf16 i32 i64
syn match dstratSbp "\<[SBP]\>\ze\s*[(,\]]"
syn match dstratNumber "\<\d\+\(\.\d\+\)\=\([eE][+-]\=\d\+\)\=\>"
syn region dstratString start=+"+ skip=+\\.+ end=+"+ oneline
syn match dstratLineComment "//.*$"
syn region dstratBlockComment start="/\*" end="\*/"

hi def link dstratDecl Structure
hi def link dstratKeyword Keyword
hi def link dstratOperator Operator
hi def link dstratConstant Constant
hi def link dstratType Type
hi def link dstratSbp Function
hi def link dstratNumber Number
hi def link dstratString String
hi def link dstratLineComment Comment
hi def link dstratBlockComment Comment

let b:current_syntax = "dstrat"
