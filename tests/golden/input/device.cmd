check /dev/zero
