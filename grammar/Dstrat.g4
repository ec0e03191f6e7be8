// The syntax of .dstrat files: layers, modules and models (the network),
// strategies (how it runs on a device mesh), search spaces (grids of
// strategies). docs/language.md describes what each construct means.
//
// Statements need no separator: every statement starts with a keyword or a
// name and ends where its last expression ends. `;` is accepted and ignored.
// Expression levels are written out (no left recursion) so that long
// operator chains parse in loops, not by recursion.
grammar Dstrat;

program : item* EOF ;

item
  : importDecl
  | componentDecl
  | strategyDecl
  | searchDecl
  | ';'
  ;

importDecl : IMPORT STRING ;

// ---- layers, modules, models ---------------------------------------------

componentDecl : kind=(LAYER | MODULE | MODEL) ID paramList? body ;

paramList : '(' (paramDecl (',' paramDecl)* ','?)? ')' ;
paramDecl : ID (':' ID)? ('=' expr)? ;

body : '{' stmt* '}' ;

stmt
  : inputStmt
  | paramStmt
  | letStmt
  | assignStmt
  | outputStmt
  | ifStmt
  | ';'
  ;

inputStmt  : INPUT ID dimList (':' ID)? ;
paramStmt  : kind=(PARAM | BUFFER) ID dimList (':' ID)? ;  // a buffer is stored, not trained
letStmt    : LET ID '=' expr ;
assignStmt : ID dimList? '=' expr ;
outputStmt : OUTPUT ID ;
ifStmt     : IF expr body (ELSE IF expr body)* (ELSE body)? ;

dimList : '[' (dimItem (',' dimItem)* ','?)? ']' ;
dimItem : ELLIPSIS | ID (':' expr)? ;

// ---- strategies ----------------------------------------------------------

strategyDecl : STRATEGY ID paramList? (FOR ID argList?)? (ON clusterRef)? strategyBody ;

clusterRef : STRING argList? ;

strategyBody : '{' strategyStmt* '}' ;

strategyStmt
  : meshStmt
  | runStmt
  | scheduleStmt
  | pipelineStmt
  | defaultStmt
  | selectorStmt
  | tieStmt
  | useStmt
  | letStmt
  | strategyIfStmt
  | ';'
  ;

meshStmt      : MESH '[' meshAxis (',' meshAxis)* ','? ']' ;
meshAxis      : ID ':' expr ;
runStmt       : kind=(TRAIN | INFERENCE) configBlock ;
scheduleStmt  : SCHEDULE configBlock ;
pipelineStmt  : PIPELINE selector OVER ID
              | PIPELINE OVER ID '{' stageDecl* '}'
              ;
stageDecl     : expr ':' selector (',' selector)* ;
defaultStmt   : DEFAULT COMPUTE sbpList ;
selectorStmt  : selector ( COMPUTE sbpList
                         | MEMORY ('(' memoryRole (',' memoryRole)* ')')? sbpList
                         | SCHEDULE configBlock ) ;
memoryRole    : ID | PARAM ;
tieStmt       : TIE selector (',' selector)+ ID ;
useStmt       : USE ID argList ;
strategyIfStmt: IF expr strategyBody (ELSE IF expr strategyBody)* (ELSE strategyBody)? ;

configBlock : '{' (configEntry (',' configEntry)* ','?)? '}' ;
configEntry : ID '=' expr ;

sbpList : '[' (axisSbp (',' axisSbp)* ','?)? ']' ;
axisSbp : ID ':' ID ('(' (ID | INT) ')')? ;

selector : selectorSegment ('.' selectorSegment)* ;
selectorSegment
  : (ID | '*') ('[' selectorIndex ']')?
  | '**'
  ;
selectorIndex : '*' | expr ('..' expr)? ;

// ---- search spaces -------------------------------------------------------

searchDecl : SEARCH ID (FOR ID argList?)? (ON clusterRef)? '{' searchStmt* '}' ;

searchStmt
  : VARY varyItem (',' varyItem)*
  | WHERE expr
  | TRY ID argList
  | letStmt
  | ';'
  ;
varyItem : ID IN expr ;

// ---- expressions ---------------------------------------------------------

argList : '(' (arg (',' arg)* ','?)? ')' ;
arg     : (ID '=')? expr ;

expr    : andExpr (OR andExpr)* ;
andExpr : notExpr (AND notExpr)* ;
notExpr : NOT* cmpExpr ;
cmpExpr : addExpr (op=('==' | '!=' | '<' | '<=' | '>' | '>=') addExpr)? ;
addExpr : mulExpr (op+=('+' | '-') mulExpr)* ;
mulExpr : unaryExpr (op+=('*' | '/' | '%') unaryExpr)* ;
unaryExpr : '-'* postfixExpr ;
postfixExpr : primary (argList | dimList)* ;

primary
  : INT
  | FLOAT
  | STRING
  | TRUE
  | FALSE
  | ID
  | SYM_1F1B
  | DIGIT_WORD
  | '(' expr ')'
  | '[' (expr (',' expr)* ','?)? ']'
  | REPEAT '(' expr ')' postfixExpr
  ;

// ---- tokens --------------------------------------------------------------

IMPORT    : 'import' ;
LAYER     : 'layer' ;
MODULE    : 'module' ;
MODEL     : 'model' ;
INPUT     : 'input' ;
PARAM     : 'param' ;
BUFFER    : 'buffer' ;
LET       : 'let' ;
OUTPUT    : 'output' ;
IF        : 'if' ;
ELSE      : 'else' ;
REPEAT    : 'repeat' ;
STRATEGY  : 'strategy' ;
FOR       : 'for' ;
ON        : 'on' ;
MESH      : 'mesh' ;
TRAIN     : 'train' ;
INFERENCE : 'inference' ;
SCHEDULE  : 'schedule' ;
PIPELINE  : 'pipeline' ;
OVER      : 'over' ;
DEFAULT   : 'default' ;
COMPUTE   : 'compute' ;
MEMORY    : 'memory' ;
TIE       : 'tie' ;
USE       : 'use' ;
SEARCH    : 'search' ;
VARY      : 'vary' ;
IN        : 'in' ;
WHERE     : 'where' ;
TRY       : 'try' ;
AND       : 'and' ;
OR        : 'or' ;
NOT       : 'not' ;
TRUE      : 'true' ;
FALSE     : 'false' ;
// The one-forward-one-backward schedule kind; a token because it starts
// with a digit.
SYM_1F1B  : '1f1b' ;

ELLIPSIS  : '...' ;
DOTDOT    : '..' ;
DOT       : '.' ;
STARSTAR  : '**' ;
STAR      : '*' ;
EQ        : '==' ;
NE        : '!=' ;
LE        : '<=' ;
GE        : '>=' ;
LT        : '<' ;
GT        : '>' ;
ASSIGN    : '=' ;
PLUS      : '+' ;
MINUS     : '-' ;
SLASH     : '/' ;
PERCENT   : '%' ;
COLON     : ':' ;
COMMA     : ',' ;
SEMI      : ';' ;
LPAREN    : '(' ;
RPAREN    : ')' ;
LBRACK    : '[' ;
RBRACK    : ']' ;
LBRACE    : '{' ;
RBRACE    : '}' ;

FLOAT  : DIGIT+ '.' DIGIT+ EXPONENT? | DIGIT+ EXPONENT ;
INT    : DIGIT+ ;
ID     : [a-zA-Z_] [a-zA-Z_0-9]* ;
// A word that starts with digits: `1F1B`, or a misspelt `1fb1`. One token,
// so the front end names the word (and the kind it may misspell) instead
// of reporting a number followed by a stray name.
DIGIT_WORD : DIGIT+ [a-zA-Z_] [a-zA-Z_0-9]* ;
STRING : '"' (~["\\\r\n] | '\\' .)* '"' ;
// A string missing its closing quote on its line; the front end reports it.
UNTERMINATED_STRING : '"' (~["\\\r\n] | '\\' .)* ;

LINE_COMMENT  : '//' ~[\r\n]* -> channel(HIDDEN) ;
// Ends at `*/` or at the end of the file; the front end reports the latter.
BLOCK_COMMENT : '/*' .*? ('*/' | EOF) -> channel(HIDDEN) ;
WS            : [ \t\r\n]+ -> skip ;
// Anything else is one bad character; the parser reports it.
ERROR_CHAR    : . ;

fragment DIGIT    : [0-9] ;
fragment EXPONENT : [eE] [+-]? DIGIT+ ;
