#!/bin/sh
# Checks that berthd-fault wraps every call of the kinds the fault suites
# walk: each symbol of those families that berthd imports (nm -u) must be
# in the wrapped list, and berthd-fault must define its __wrap_.
#   check-wrapped.sh BERTHD BERTHD_FAULT SYMBOL...
# A new call (pwritev, renameat2's successor, umount) fails this until it
# is added to tests/fault/fault.cmake and tests/fault/fault_wrap.c.
set -eu
berthd=$1 fault=$2
shift 2
wrapped=" $* "
status=0
families='^(fsync|fdatasync|syncfs|sync_file_range|rename[a-z0-9]*|write|writev|pwrite[a-z0-9]*|ftruncate[a-z0-9]*|fallocate[a-z0-9]*|mount[a-z_]*|umount[a-z0-9]*|open_tree|move_mount|fsmount|unlink[a-z]*|rmdir|remove|mkdir[a-z]*)$'
for sym in $(nm -u "$berthd" | awk '{print $2}' | sed 's/@.*//' | sort -u); do
    if echo "$sym" | grep -Eq "$families"; then
        case "$wrapped" in
        *" $sym "*) ;;
        *)
            echo "berthd calls $sym, which berthd-fault does not wrap (tests/fault/fault.cmake)"
            status=1
            ;;
        esac
    fi
done
defined=$(nm "$fault" | awk '$2 == "T" {print $3}')
for sym in "$@"; do
    if ! echo "$defined" | grep -qx "__wrap_$sym"; then
        echo "berthd-fault has no __wrap_$sym (tests/fault/fault_wrap.c)"
        status=1
    fi
done
[ $status -eq 0 ] && echo "berthd-fault wraps all $# calls of the walked kinds that berthd makes"
exit $status
