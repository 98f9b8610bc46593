# perl's hashes under spill=1, for test_spill_programs.sh: a hash of
# records is built, its first third read back twice in a scrambled order
# (the part a limit lets stay resident), every record read once more, and
# a third of them deleted.  What is printed depends on every byte read
# (perl's own hash order plays no part).  test_spill_programs.sh runs it
# under memory.high at 70% of its peak: every lookup reads the bucket
# array and entries spread over the whole heap, and reads are not seen,
# only refaults, so at half its peak it thrashed (5-9 s here, 40-68 s
# with both CPUs busy); at 70%, 3-9 s.
use strict;
use warnings;

my $n = 150000;
my $hot = int($n / 3);
my %h;
for my $i (0 .. $n - 1) {
	$h{"k$i"} = sprintf("%07d ", $i) . ("perl" x (5 + $i % 9)) . ($i * 7919 % 100003);
}
my ($len, $sum) = (0, 0);
sub visit {
	my $v = $h{"k" . $_[0]};
	$len += length $v;
	$sum = ($sum + unpack("%32C*", $v)) % 4294967296;
}
for my $round (1 .. 2) {
	visit(($_ * 7919 + $round) % $hot) for 0 .. $hot - 1;
}
visit($_) for 0 .. $n - 1;
delete $h{"k$_"} for grep { $_ % 3 == 0 } 0 .. $n - 1;
print "read $len bytes, byte sum $sum, ", scalar(keys %h), " records left\n";
