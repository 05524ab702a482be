"""Faults injected into real ddptrain workers (on PYTHONPATH in tests).

FAULT_ACTION, on rank FAULT_RANK ("all": every rank), first attempt only (a worker restarted by
torchrun runs clean):
  stall:SECONDS | kill | signal:NAME | raise:MESSAGE | nan_weights
                                      at the FAULT_STEP-th optimizer update (1-based);
                                      nan_weights: right after that update, a weight becomes NaN
                                      signal goes to the launcher, or to this process without one
  slow_forward:SECONDS                every forward pass of the model
  slow_data:SECONDS                   every image decoded (in the DataLoader's processes too)
  no_flock                            flock on the run directory's lock fails with ENOLCK, as on NFS without a
                                      lock manager (in the launcher too)
"""

import os
import sys


def _install() -> None:
    import signal
    import time

    _action, _, _arg = os.environ["FAULT_ACTION"].partition(":")

    if _action == "slow_forward":
        import ddptrain.train.trainer as _trainer

        _real_wrap = _trainer.wrap_ddp

        def _wrap_slow_model(model, *args, **kwargs):
            model.register_forward_pre_hook(lambda module, inputs: time.sleep(float(_arg)))
            return _real_wrap(model, *args, **kwargs)

        _trainer.wrap_ddp = _wrap_slow_model
    elif _action == "no_flock":
        import errno
        import fcntl

        _real_flock = fcntl.flock

        def _flock(fd, operation):
            number = fd if isinstance(fd, int) else fd.fileno()
            if os.readlink(f"/proc/self/fd/{number}").endswith(".ddptrain.lock"):
                raise OSError(errno.ENOLCK, os.strerror(errno.ENOLCK))
            return _real_flock(fd, operation)

        fcntl.flock = _flock
    elif _action == "slow_data":
        from ddptrain.data import datasets as _datasets
        from ddptrain.data import transforms as _transforms

        def _slowed(real):
            def slow(*args, **kwargs):
                time.sleep(float(_arg))  # slow storage: each image read from a file or a shard, then decoded
                return real(*args, **kwargs)

            return slow

        _datasets.decode_upright = _slowed(_datasets.decode_upright)  # a transform not ddptrain's own
        _transforms.decode_rgb = _slowed(_transforms.decode_rgb)  # ddptrain's: the whole image's decode
        _transforms.decode_region = _slowed(_transforms.decode_region)  # and a training crop's region alone
    else:
        import torch as _torch

        import ddptrain.train.loop as _loop

        _real_step, _calls = _loop.optimizer_step, []

        def _faulty_step(*args, **kwargs):
            _calls.append(1)
            if len(_calls) == int(os.environ["FAULT_STEP"]):
                if _action == "nan_weights":  # the step's loss was finite; the weights it leaves are not
                    done = _real_step(*args, **kwargs)
                    with _torch.no_grad():
                        next(args[0].parameters()).fill_(float("nan"))
                    return done
                if _action == "stall":
                    time.sleep(float(_arg))  # this rank stops answering
                elif _action == "raise":
                    raise RuntimeError(_arg)
                elif _action == "kill":
                    os.kill(os.getpid(), signal.SIGKILL)
                elif _action == "signal":
                    target = os.getppid() if "LOCAL_RANK" in os.environ else os.getpid()
                    os.kill(target, getattr(signal, _arg))
                    time.sleep(2)  # the signal reaches every worker before the ranks next agree
            return _real_step(*args, **kwargs)

        _loop.optimizer_step = _faulty_step


_rank = os.environ.get("RANK", "0")
if (
    os.environ.get("FAULT_ACTION")
    and os.environ.get("FAULT_RANK", "0") in (_rank, "all")
    and os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") == "0"
):
    try:
        _install()
    except Exception as error:  # Python would print it and run on without the fault: the test would prove nothing
        print(f"fault hook: could not inject {os.environ['FAULT_ACTION']}: {error!r}", file=sys.stderr, flush=True)
        os._exit(97)
