"""scripts/sass_schedule.py on a hand-made cuobjdump -sass excerpt (no GPU, no toolkit)."""
import importlib.util
import os

_spec = importlib.util.spec_from_file_location(
    "sass_schedule", os.path.join(os.path.dirname(__file__), "..", "sass_schedule.py"))
sass_schedule = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sass_schedule)

SASS = """
	code for sm_90a
		Function : _Z6kernelILi64EEvv
	.headerflags	@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R133+UR21], R132 ;   /* 0x0 */
        /*0010*/                   HGMMA.64x64x16.F32.BF16 R24, R100, gdesc[UR12], R24 ;       /* 0x0 */
        /*0020*/                   HGMMA.64x64x16.F32.BF16 R24, R96, gdesc[UR20], R24, gsb0 ;  /* 0x0 */
        /*0030*/                   HGMMA.64x64x16.F32.BF16 R56, R128, gdesc[UR12].tnspB, R56, gsb0 ;  /* 0x0 */
        /*0040*/                   WARPGROUP.DEPBAR.LE gsb0, 0x1 ;                           /* 0x0 */
        /*0050*/                   MUFU.EX2 R128, R128 ;                                     /* 0x0 */
        /*0060*/                   MUFU.EX2 R25, R25 ;                                       /* 0x0 */
        /*0070*/                   F2FP.BF16.F32.PACK_AB R116, R41, R116 ;                   /* 0x0 */
        /*0080*/                   WARPGROUP.DEPBAR.LE gsb0, 0x0 ;                           /* 0x0 */
        /*0090*/               @!P1 SYNCS.ARRIVE.TRANS64.A1T0 RZ, [UR11], RZ ;              /* 0x0 */
        /*00a0*/                   DEPBAR.LE SB0, 0x0 ;                                      /* 0x0 */
        /*00b0*/              @!P0 BRA 0x10 ;                                               /* 0x0 */
        /*00c0*/                   BRA 0xd0 ;                                                /* 0x0 */
		Function : _Z5otherv
        /*0000*/                   EXIT ;                                                    /* 0x0 */
"""


def test_schedule_names_each_event_in_order():
    funcs = sass_schedule.parse_functions(SASS)
    assert set(funcs) == {"_Z6kernelILi64EEvv", "_Z5otherv"}
    ins = funcs["_Z6kernelILi64EEvv"]
    assert len(ins) == 13 and ins[9][1] == "SYNCS.ARRIVE.TRANS64.A1T0"  # (the predicate is skipped)
    assert sass_schedule.schedule(ins) == "T@0 Gq2@1 Gv@3 W1@4 e2@5 p@7 W0@8 A@9 D@10 ^@11"
    assert sass_schedule.loops(ins) == [(1, 11, 3)]  # the forward branch is no loop


def test_main_reads_a_dump(tmp_path, capsys):
    dump = tmp_path / "k.sass"
    dump.write_text(SASS)
    assert sass_schedule.main(["--sass", str(dump), "--loops", "kernelILi64"]) == 0
    out = capsys.readouterr().out
    assert "_Z6kernelILi64EEvv: 13 instructions" in out and "W1@4 e2@5" in out and "loop 1..11: 3 wgmma" in out


def test_compare_matches_kernels_across_files_and_tells_changes():
    old = SASS.replace("_Z6kernelILi64EEvv", "_ZN1a30_GLOBAL__N__1234abcd_10_x_cu_deadbeef6kernelEv")
    new_same = old.replace("_GLOBAL__N__1234abcd_10_x_cu_deadbeef", "_GLOBAL__N__99ff00aa_10_y_cu_cafef00d")
    new_changed = new_same.replace("MUFU.EX2 R25, R25", "MUFU.EX2 R26, R25")
    parse = sass_schedule.parse_functions
    same = sass_schedule.compare(parse(old), parse(new_same))
    assert same == {"_ZN1a_GLOBAL__N_6kernelEv": "identical", "_Z5otherv": "identical"}
    changed = sass_schedule.compare(parse(old), parse(new_changed))
    assert changed["_ZN1a_GLOBAL__N_6kernelEv"] == "different (13 vs 13 instructions)"
    assert sass_schedule.compare({}, parse(old))["_Z5otherv"] == "new"
