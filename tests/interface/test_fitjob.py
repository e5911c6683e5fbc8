"""What the page may start as a fit job (daskgp.interface.fitjob): only the families with a command, their
built-in datasets, bounded integers and the server's own schedulers; the command is an argument list (no
shell), and every family it starts has a view."""

import pytest

from daskgp.interface.fitjob import FIT_DATASETS, FitJobSettings
from daskgp.interface.fitview import FIT_KINDS


def test_every_startable_family_has_a_view():
    assert set(FIT_DATASETS) <= set(FIT_KINDS)


@pytest.mark.parametrize(("kw", "message"), [
    ({"family": "gplvm"}, "no fit of family 'gplvm'"),
    ({"family": "sgpr; rm -rf /"}, "no fit of family"),
    ({"family": "gpc", "dataset": "concrete"}, "gpc fits one of breast_cancer"),
    ({"dataset": "../../etc/passwd"}, "sgpr fits one of"),
    ({"n_inducing": 1}, r"n_inducing must be an integer in \[5, 2000\], got 1"),
    ({"max_iter": 10**9}, "max_iter must be"),
    ({"seed": -1}, "seed must be"),
    ({"n_inducing": 50.0}, "n_inducing must be an integer"),
    ({"scheduler": "tcp://10.0.0.1:8786"}, "is not one this server may use"),
])
def test_a_bad_setting_is_one_line(kw, message):
    with pytest.raises(ValueError, match=message) as e:
        FitJobSettings(**kw).validate()
    assert "\n" not in str(e.value)


def test_the_command_is_an_argument_list():
    s = FitJobSettings(family="advgp", dataset="flights", n_inducing=20, max_iter=30, seed=3,
                       scheduler="tcp://10.0.0.1:8786", allowed_schedulers=("tcp://10.0.0.1:8786",)).validate()
    argv = s.argv("/runs/x/fit.nc")
    assert argv[1:] == ["-m", "daskgp", "advgp", "--data", "flights", "--inducing", "20", "--max-iter", "30",
                        "--seed", "3", "--scheduler", "tcp://10.0.0.1:8786", "--out", "/runs/x/fit.nc"]
    assert FitJobSettings().validate().argv("f.nc")[-4:] == ["--workers", "1", "--out", "f.nc"]
