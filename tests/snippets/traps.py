"""Every trap beside its correct form (demos/*/traps.py): the snippet prints what each side returned."""

from demos.autograd import traps as autograd
from demos.modules import traps as modules
from demos.saving import traps as saving
from demos.tensors import traps as tensors
from demos.training import traps as training
from tests.snippets import checks


@checks(autograd.data_versus_detach, autograd.leaf_update, autograd.uneven_micro_batches, modules.backward_hooks,
        modules.batchnorm_running_var, saving.strict_false, saving.best_weights, tensors.advanced_indexing,
        tensors.squeeze_batch_of_one, training.clip_before_unscale_trap)
def trap_pair(r, run):
    assert run(r.code) == f"trap: {r.trap}\ncorrect: {r.correct}\n"
