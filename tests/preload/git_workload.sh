#!/bin/sh
# git creating a repository and committing to it, run in an empty directory
# by tests/preload/test_git.sh.  Names, e-mails, dates and HOME are fixed,
# so the object and commit hashes it prints are the same in every run.
set -eu

export HOME="$PWD/home" GIT_CONFIG_NOSYSTEM=1 GIT_TERMINAL_PROMPT=0
export GIT_AUTHOR_NAME="Test Author" GIT_AUTHOR_EMAIL=author@example.invalid
export GIT_COMMITTER_NAME="Test Committer" GIT_COMMITTER_EMAIL=committer@example.invalid
export GIT_AUTHOR_DATE="2024-01-02T03:04:05+0000" GIT_COMMITTER_DATE="2024-01-02T03:04:05+0000"
mkdir home repo
cd repo
git init -q -b main .
git config gc.autoDetach false

mkdir src docs
seq 1 60000 | awk '{ printf "line %d of the big file: %d\n", $1, $1 * $1 % 100003 }' >big.txt
i=1
while [ $i -le 120 ]; do
	printf 'file %d\n%s\n' $i "$(seq -s ' ' $i $((i + 40)))" >src/f$i.txt
	i=$((i + 1))
done
printf '# docs\n' >docs/README.md
git add -A
git commit -q -m "first commit: 122 files"

sed -i 's/^line 1\([0-9]\)/LINE 1\1/' big.txt
echo "appended" >>src/f7.txt
git rm -q src/f9.txt
git mv src/f8.txt src/eight.txt
git add -A
git commit -q -m "second commit: edits, a removal and a rename"
git tag -a v1 -m "tag v1"
git checkout -q -b side HEAD~1
echo "side branch" >docs/side.md
git add docs/side.md
git commit -q -m "side branch commit"
git checkout -q main
git merge -q --no-edit side

git log --format='%H %T %P %s'
git rev-parse HEAD 'HEAD^{tree}' v1
git diff --stat HEAD~2 HEAD
git cat-file -p HEAD
git ls-tree -r HEAD | wc -l
git gc -q
git fsck --no-progress --full
git count-objects -v | grep -E '^(count|in-pack|packs)'
git archive --format=tar HEAD | md5sum
