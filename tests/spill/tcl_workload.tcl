# tclsh under spill=1, for `make stress-spill-programs` (SPILL_PROGRAMS_MORE):
# Tcl's own allocator takes its blocks from malloc; a list and a dict of
# strings are built, read back and printed as sums of every byte read.
set l {}
set d [dict create]
for {set i 0} {$i < 200000} {incr i} {
	set s [string repeat z [expr {30 + $i % 70}]]$i
	lappend l $s
	if {$i % 4 == 0} { dict set d k$i [string reverse $s] }
}
set len 0
set sum 0
foreach x $l { incr len [string length $x] }
dict for {k v} $d { incr sum [string length $v]; binary scan [string index $v 0] c c; incr sum $c }
puts "$len $sum [llength $l] [dict size $d]"
