#!/usr/bin/env python3
"""Function lengths in lib/ and passes/ (issue 51, item 5): how many functions span more than
80 and 100 lines, and the longest. A brace-depth scan after stripping comments and strings: a
function is a top-level "{" whose head has a parameter list (lambdas inside a function count
towards it). Run from the repository root: scripts/function-lengths.py [N longest]."""
import re, glob, sys
res=[]
files=[f for pat in ('lib/**/*.cpp','passes/**/*.cpp','lib/**/*.h','passes/**/*.h') for f in glob.glob(pat, recursive=True)]
for f in files:
    text=open(f).read()
    # strip comments and strings
    text=re.sub(r'//[^\n]*','',text)
    text=re.sub(r'/\*.*?\*/',lambda m:'\n'*m.group(0).count('\n'),text,flags=re.S)
    text=re.sub(r'R"\((.*?)\)"',lambda m:'""'+'\n'*m.group(0).count('\n'),text,flags=re.S)
    text=re.sub(r'"(\\.|[^"\\\n])*"','""',text)
    text=re.sub(r"'(\\.|[^'\\\n])'","''",text)
    depth=0; stack=[]; stmt=''; line=1
    for ch in text:
        if ch=='\n': line+=1
        if ch=='{':
            head=stmt.strip()
            isfn = ('(' in head and not re.search(r'\b(namespace|class|struct|enum|union)\b', head.split('(')[0])
                    and not re.match(r'^(if|for|while|switch|else|do|catch|try)\b', head.split('\n')[-1].strip())
                    and not head.rstrip().endswith(('=', ',', '(', 'return')) and not re.search(r'[=,(]\s*$', head))
            # only top-level-ish functions (not lambdas inside function bodies)
            infn = any(s[0] for s in stack)
            stack.append((isfn and not infn, line, head.split('\n')[-1].strip()[:80] or head[-80:]))
            stmt=''
        elif ch=='}':
            if stack:
                isf, start, name = stack.pop()
                if isf: res.append((line-start+1, f, name))
            stmt=''
        elif ch==';':
            stmt=''
        else:
            stmt+=ch
res.sort(reverse=True)
print(len(res),'functions;',sum(1 for r in res if r[0]>80),'over 80;',sum(1 for r in res if r[0]>100),'over 100')
for r in res[:int(sys.argv[1]) if len(sys.argv)>1 else 30]: print(r)
