"""``python -m xla_explorer.exercises``: exercise sheets for a class.

    python -m xla_explorer.exercises assignment --ops gather,pad,scatter --n 6 --seed 0 --out DIR
    python -m xla_explorer.exercises grade DIR completed.ipynb [--student NAME]
    python -m xla_explorer.exercises sheet --ops pad --n 3 --seed 1     (print a sheet)

``assignment`` writes an nbgrader course folder: the teacher's notebook (with solutions) in
DIR/source/, the student's (solutions stripped, autograded checks kept) in DIR/release/.
``grade`` autogrades one completed notebook with nbgrader and prints its score.
"""
import argparse
import sys


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m xla_explorer.exercises", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--ops", default="", help="comma-separated ops (HLO opcodes or API names); default: all")
    common.add_argument("--n", type=int, default=6, help="number of exercises")
    common.add_argument("--seed", type=int, default=0)
    common.add_argument("--level", type=int, default=1, choices=(1, 2, 3))
    common.add_argument("--kinds", default="", help="comma-separated kinds (default: every kind an op has)")
    a = sub.add_parser("assignment", parents=[common], help="write an nbgrader assignment")
    a.add_argument("--out", required=True, help="the course folder to write")
    a.add_argument("--name", default="xla_exercises", help="the assignment's name")
    a.add_argument("--points", type=int, default=1, help="points per exercise")
    g = sub.add_parser("grade", help="autograde a completed notebook")
    g.add_argument("dir")
    g.add_argument("notebook")
    g.add_argument("--student", default="student")
    sub.add_parser("sheet", parents=[common], help="print a sheet (the student's view)")
    args = parser.parse_args(argv)

    def split(text):
        return [x.strip() for x in text.split(",") if x.strip()] or None

    if args.command == "assignment":
        from .assignment import write_assignment
        teacher, student = write_assignment(args.out, split(args.ops), n=args.n, seed=args.seed, level=args.level,
                                            kinds=split(args.kinds), points=args.points, name=args.name)
        print(f"teacher's notebook: {teacher}\nstudent's notebook: {student}\n"
              f"grade a completed copy: python -m xla_explorer.exercises grade {args.out} COMPLETED.ipynb")
    elif args.command == "grade":
        from .assignment import grade
        score, total = grade(args.dir, args.notebook, student=args.student)
        print(f"{args.student}: {score:g} / {total:g}")
    else:
        from . import quiz
        print(quiz(split(args.ops), n=args.n, seed=args.seed, level=args.level, kinds=split(args.kinds)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
