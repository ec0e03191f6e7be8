au BufRead,BufNewFile *.dstrat set filetype=dstrat
