"""Executors: the program-counter machine over a vm program, and the stackless executor."""

from abir.vm.machine import DEFAULT_MAX_STACK_DEPTH, Machine, compile_machine
from abir.vm.stackless import StacklessExecutor, execute_stackless

__all__ = ["DEFAULT_MAX_STACK_DEPTH", "Machine", "StacklessExecutor", "compile_machine", "execute_stackless"]
